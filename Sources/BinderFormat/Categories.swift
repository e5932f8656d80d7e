/// The usual binder categories and the `metadata.type` the apps give entries in them.
public enum Categories {
    /// Usual top-level folders and their document type, in the apps' display order.
    /// Users may create any other folder; this is not a closed set.
    public static let folderTypes: [(folder: String, type: String)] = [
        ("visits", "visit"),
        ("labs", "lab"),
        ("conditions", "condition"),
        ("medications", "medication"),
        ("allergies", "allergy"),
        ("immunizations", "immunization"),
        ("procedures", "procedure"),
        ("imaging", "imaging"),
        ("insurance", "insurance"),
        ("documents", "document"),
    ]

    /// The type of entries in folders that are not a known category. The apps write
    /// `note` for entries in user-made folders (see the sample binder).
    public static let defaultType = "note"

    /// The type for a new document created in `path` (a folder path relative to the
    /// binder root, e.g. `conditions/back-acne`).
    ///
    /// The deepest folder whose name is a known category wins, so `conditions/back-acne`
    /// and `labs/2024` take their top-level folder's type, while a category nested in a
    /// user folder keeps its own (`my-info/allergies` → `allergy`, as in the sample
    /// binder). Names match case-insensitively. No known folder → `defaultType`.
    public static func documentType(forFolder path: String) -> String {
        let components = path.split(separator: "/").reversed()
        for component in components {
            let name = component.lowercased()
            if let match = folderTypes.first(where: { $0.folder == name }) {
                return match.type
            }
        }
        return defaultType
    }
}
